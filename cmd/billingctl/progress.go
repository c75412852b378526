package main

import (
	"fmt"
	"io"
	"os"
	"strings"
	"time"
)

// progress draws a one-line progress bar on a terminal while a command
// pages through a status index. The number of pages is not known in
// advance (a query's pages end when DynamoDB says so), so the bar is a
// moving block beside the counts so far. It draws nothing unless enabled.
type progress struct {
	w     io.Writer
	on    bool
	label string
	frame int
	drawn bool
	last  time.Time
	now   func() time.Time
}

// progressWidth is the width of the bar's track.
const progressWidth = 20

// newProgress returns a progress bar on the app's stderr, enabled only
// when stderr is a terminal (and $TERM is not "dumb").
func (a *app) newProgress(label string) *progress {
	return &progress{w: a.stderr, on: isTerminal(a.stderr) && a.env("TERM") != "dumb", label: label, now: time.Now}
}

// isTerminal reports whether f (an io.Reader or io.Writer) is a character
// device, such as a terminal. Files, pipes and buffers are not.
func isTerminal(rw any) bool {
	f, ok := rw.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// update shows the counts after a page; it redraws at most ten times a
// second.
func (p *progress) update(pages, read, returned int) {
	if !p.on {
		return
	}
	now := p.now()
	if p.drawn && now.Sub(p.last) < 100*time.Millisecond {
		return
	}
	p.last, p.drawn = now, true
	pos := p.frame % (2 * (progressWidth - 4))
	if pos >= progressWidth-4 {
		pos = 2*(progressWidth-4) - pos
	}
	p.frame++
	bar := strings.Repeat(" ", pos) + "====" + strings.Repeat(" ", progressWidth-4-pos)
	fmt.Fprintf(p.w, "\r%s [%s] page %d, %d items read, %d returned\x1b[K", p.label, bar, pages, read, returned)
}

// finish clears the bar's line.
func (p *progress) finish() {
	if p.on && p.drawn {
		fmt.Fprint(p.w, "\r\x1b[K")
		p.drawn = false
	}
}
