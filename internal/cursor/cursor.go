// Package cursor turns a DynamoDB LastEvaluatedKey into an opaque,
// URL-safe token and back.
//
// A token is base64url (no padding) of: a version byte, the length-prefixed
// key as DynamoDB JSON, and an 8-byte checksum (SHA-256) over the query scope
// and the key. The scope names the query the token belongs to (table, index,
// status), so a token from one query is rejected by another instead of
// silently restarting somewhere else. The checksum detects corruption and
// casual edits; it is not a secret signature, so Decode also checks the key's
// shape (only the expected attribute names, all non-empty strings).
package cursor

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"

	"github.com/dynabill/billing/internal/av"

	"github.com/dynabill/billing/internal/ddbjson"
)

const (
	version  = 1
	sumLen   = 8
	maxToken = 4096
	maxValue = 1024
)

// ErrInvalid is the cause of every decoding failure.
var ErrInvalid = errors.New("invalid cursor")

// Encode makes a token for key within scope. A nil or empty key gives "".
func Encode(scope string, key map[string]av.AttributeValue) (string, error) {
	if len(key) == 0 {
		return "", nil
	}
	js, err := ddbjson.MarshalItem(key)
	if err != nil {
		return "", err
	}
	js = bytes.TrimSpace(js)
	var buf bytes.Buffer
	buf.WriteByte(version)
	buf.Write(binary.AppendUvarint(nil, uint64(len(js))))
	buf.Write(js)
	buf.Write(sum(scope, js))
	return base64.RawURLEncoding.EncodeToString(buf.Bytes()), nil
}

// Decode checks token against scope and returns its key, which holds exactly
// the attribute names given, each a non-empty string. "" decodes to nil (start
// from the top).
func Decode(scope, token string, names ...string) (map[string]av.AttributeValue, error) {
	if token == "" {
		return nil, nil
	}
	if len(token) > maxToken {
		return nil, fmt.Errorf("%w: longer than %d bytes", ErrInvalid, maxToken)
	}
	raw, err := base64.RawURLEncoding.DecodeString(token)
	if err != nil {
		return nil, fmt.Errorf("%w: not base64url", ErrInvalid)
	}
	if len(raw) < 2 || raw[0] != version {
		return nil, fmt.Errorf("%w: unknown version", ErrInvalid)
	}
	n, w := binary.Uvarint(raw[1:])
	if w <= 0 || n > uint64(len(raw)) {
		return nil, fmt.Errorf("%w: bad length", ErrInvalid)
	}
	body := raw[1+w:]
	if uint64(len(body)) != n+sumLen {
		return nil, fmt.Errorf("%w: bad length", ErrInvalid)
	}
	js, got := body[:n], body[n:]
	if !bytes.Equal(got, sum(scope, js)) {
		return nil, fmt.Errorf("%w: checksum mismatch (corrupted, edited, or from another query)", ErrInvalid)
	}
	key, err := ddbjson.UnmarshalItem(js)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	if len(key) != len(names) {
		return nil, fmt.Errorf("%w: want key attributes %v", ErrInvalid, names)
	}
	for name, v := range key {
		s, ok := v.(*av.AttributeValueMemberS)
		if !slices.Contains(names, name) || !ok || s.Value == "" || len(s.Value) > maxValue {
			return nil, fmt.Errorf("%w: bad key attribute %q", ErrInvalid, name)
		}
	}
	return key, nil
}

func sum(scope string, js []byte) []byte {
	h := sha256.New()
	h.Write([]byte(scope))
	h.Write([]byte{0})
	h.Write(js)
	return h.Sum(nil)[:sumLen]
}
