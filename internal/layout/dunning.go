package layout

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/dynabill/billing"
	"github.com/dynabill/billing/internal/timefmt"
)

// This file is the codec of a period's dunning: billing_dunning, the state
// of the retry schedule, the notices claimed and how it ended (a JSON
// object in an S attribute, its times in timefmt's nine-digit form).

// The bounds of a stored dunning.
const (
	maxDunningRetries  = 400
	maxDunningNotices  = 64
	maxDunningURL      = 2048
	maxNoticeKind      = 64
	maxDunningEnd      = 32
	maxDunningAttempts = 1 << 30 // as billing_attempt
)

// dunningZero reports whether d is the zero Dunning: every field zero,
// written as no attribute.
func dunningZero(d *billing.Dunning) bool {
	return d.Since.IsZero() && d.Attempt == 0 && d.Kind == "" && d.Retries == 0 && d.ActionURL == "" &&
		len(d.Notices) == 0 && d.Ended.IsZero() && d.End == ""
}

// checkDunningTime checks a time of a dunning: not zero, in the years
// 1..9999 (UTC), which timefmt writes and reads back Equal.
func checkDunningTime(t time.Time) error {
	if t.IsZero() {
		return errors.New("zero")
	}
	if y := t.UTC().Year(); y < 1 || y > 9999 {
		return fmt.Errorf("%w: year %d, want 1..9999", billing.ErrInvalidDate, y)
	}
	return nil
}

// checkDunning checks the dunning of s as a store writes it: nothing
// (the zero Dunning), or a Since (not zero, in the years 1..9999), an
// Attempt of 1 or more, Retries of 0..400, a known Kind, an ActionURL of
// at most 2048 bytes, at most 64 notices, each with a kind of 1 to 64
// bytes, an attempt of 0 or more and an At (as Since), an Ended that is
// zero or not before Since, and an End, of at most 32 bytes, exactly when
// Ended is set. Its strings are UTF-8 (encoding/json would write another
// string for one that is not, read back different). It returns the value at fault for the error and the cause
// (wrapping billing.ErrInvalidDate for a time out of range), or a nil
// cause; the attribute is always billing_dunning.
func checkDunning(s *billing.Period) (value string, cause error) {
	d := &s.Dunning
	if dunningZero(d) {
		return "", nil
	}
	if err := checkDunningTime(d.Since); err != nil {
		return "since " + d.Since.String(), fmt.Errorf("since: %w", err)
	}
	switch {
	case d.Attempt < 1 || d.Attempt > maxDunningAttempts:
		return "attempt " + strconv.Itoa(d.Attempt), fmt.Errorf("attempt: want 1..%d", maxDunningAttempts)
	case d.Retries < 0 || d.Retries > maxDunningRetries:
		return "retries " + strconv.Itoa(d.Retries), fmt.Errorf("retries: want 0..%d", maxDunningRetries)
	case !d.Kind.Valid():
		return "kind " + strconv.Quote(string(d.Kind)), errors.New("kind: an unknown decline kind")
	case len(d.ActionURL) > maxDunningURL:
		return "action_url of " + strconv.Itoa(len(d.ActionURL)) + " bytes", fmt.Errorf("action_url: at most %d bytes", maxDunningURL)
	case !utf8.ValidString(d.ActionURL):
		return "action_url " + strconv.Quote(d.ActionURL), errors.New("action_url: not UTF-8")
	case len(d.Notices) > maxDunningNotices:
		return strconv.Itoa(len(d.Notices)) + " notices", fmt.Errorf("%d notices, at most %d", len(d.Notices), maxDunningNotices)
	}
	for i := range d.Notices {
		n := &d.Notices[i]
		if n.Kind == "" || len(n.Kind) > maxNoticeKind || !utf8.ValidString(n.Kind) {
			return "notice kind " + strconv.Quote(n.Kind), fmt.Errorf("notice %d: a kind of 1 to %d bytes", i, maxNoticeKind)
		}
		if n.Attempt < 0 || n.Attempt > maxDunningAttempts {
			return "notice attempt " + strconv.Itoa(n.Attempt), fmt.Errorf("notice %d: attempt: want 0..%d", i, maxDunningAttempts)
		}
		if err := checkDunningTime(n.At); err != nil {
			return "notice at " + n.At.String(), fmt.Errorf("notice %d: at: %w", i, err)
		}
	}
	if !d.Ended.IsZero() {
		if err := checkDunningTime(d.Ended); err != nil {
			return "ended " + d.Ended.String(), fmt.Errorf("ended: %w", err)
		}
		if d.Ended.Before(d.Since) {
			return "ended " + d.Ended.String() + " since " + d.Since.String(), errors.New("ended before since")
		}
	}
	switch {
	case (d.End == "") != d.Ended.IsZero():
		return "end " + strconv.Quote(string(d.End)) + ", ended " + d.Ended.String(), errors.New("end and ended go together")
	case len(d.End) > maxDunningEnd || !utf8.ValidString(string(d.End)):
		return "end " + strconv.Quote(string(d.End)), fmt.Errorf("end: at most %d bytes", maxDunningEnd)
	}
	return "", nil
}

// wireTime is a time of billing_dunning: written in timefmt's nine-digit
// form (UTC), read in any RFC 3339 form; zero when absent.
type wireTime time.Time

func (t wireTime) IsZero() bool { return time.Time(t).IsZero() }

func (t wireTime) MarshalJSON() ([]byte, error) {
	b := make([]byte, 0, len(timefmt.NanosLayout)+2)
	b = append(b, '"')
	b, err := timefmt.AppendNanos(b, time.Time(t))
	if err != nil {
		return nil, err
	}
	return append(b, '"'), nil
}

func (t *wireTime) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		return nil // encoding/json's convention: null leaves the value (zero)
	}
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("want a timestamp string: %w", err)
	}
	v, err := timefmt.Parse(s)
	if err != nil {
		return err
	}
	*t = wireTime(v)
	return nil
}

// dunningWire and noticeWire are billing.Dunning and DunningNotice as
// written: the same fields and JSON names (TestDunningWireMirrorsRoot
// holds them together), the times as wireTime.
type (
	dunningWire struct {
		Since     wireTime            `json:"since"`
		Attempt   int                 `json:"attempt"`
		Kind      billing.DeclineKind `json:"kind,omitempty"`
		Retries   int                 `json:"retries,omitempty"`
		ActionURL string              `json:"action_url,omitempty"`
		Notices   []noticeWire        `json:"notices,omitempty"`
		Ended     wireTime            `json:"ended,omitzero"`
		End       billing.DunningEnd  `json:"end,omitempty"`
	}
	noticeWire struct {
		Kind    string   `json:"kind"`
		Attempt int      `json:"attempt"`
		At      wireTime `json:"at"`
	}
)

// encodeDunning is the text of billing_dunning for d, which checkDunning
// accepted and is not zero: the JSON object encoding/json writes for its
// wire form. The same dunning gives the same text (stores compare
// encodings).
func encodeDunning(d *billing.Dunning) (string, error) {
	w := dunningWire{Since: wireTime(d.Since), Attempt: d.Attempt, Kind: d.Kind, Retries: d.Retries,
		ActionURL: d.ActionURL, Ended: wireTime(d.Ended), End: d.End}
	if len(d.Notices) > 0 {
		w.Notices = make([]noticeWire, len(d.Notices))
		for i, n := range d.Notices {
			w.Notices[i] = noticeWire{Kind: n.Kind, Attempt: n.Attempt, At: wireTime(n.At)}
		}
	}
	b, err := json.Marshal(&w)
	if err != nil {
		return "", err
	}
	return string(b), nil
}

// decodeDunning reads the text of billing_dunning: a JSON object of a
// dunning, its times in UTC; an empty object reads as the zero Dunning.
// Fields the object has and Dunning lacks are ignored.
func decodeDunning(text string) (billing.Dunning, error) {
	if bytes.Equal(bytes.TrimSpace([]byte(text)), []byte("null")) {
		return billing.Dunning{}, errors.New("want a JSON object of a dunning, not null")
	}
	var w dunningWire
	if err := json.Unmarshal([]byte(text), &w); err != nil {
		return billing.Dunning{}, fmt.Errorf("want a JSON object of a dunning: %w", err)
	}
	d := billing.Dunning{Since: time.Time(w.Since), Attempt: w.Attempt, Kind: w.Kind, Retries: w.Retries,
		ActionURL: w.ActionURL, Ended: time.Time(w.Ended), End: w.End}
	if len(w.Notices) > 0 {
		d.Notices = make([]billing.DunningNotice, len(w.Notices))
		for i, n := range w.Notices {
			d.Notices[i] = billing.DunningNotice{Kind: n.Kind, Attempt: n.Attempt, At: time.Time(n.At)}
		}
	}
	return d, nil
}
