package enum_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/dynabill/billing/internal/enum"
)

type color string

var errBadColor = errors.New("bad color")

var colors = enum.New[color]("RED", "GREEN", "BLUE")

func badColor(raw string) error { return &colorError{raw} }

type colorError struct{ raw string }

func (e *colorError) Error() string { return errBadColor.Error() + ": " + e.raw }
func (e *colorError) Unwrap() error { return errBadColor }

func TestValuesIsAnOrderedCopy(t *testing.T) {
	vs := colors.Values()
	require.Equal(t, []color{"RED", "GREEN", "BLUE"}, vs)
	vs[0] = "PURPLE"
	require.Equal(t, []color{"RED", "GREEN", "BLUE"}, colors.Values(), "Values must not expose the set")
}

func TestValidAndIndex(t *testing.T) {
	for _, tt := range []struct {
		v     color
		valid bool
		index int
	}{
		{"RED", true, 0},
		{"GREEN", true, 1},
		{"BLUE", true, 2},
		{"red", false, -1},
		{" RED", false, -1},
		{"", false, -1},
		{"PURPLE", false, -1},
	} {
		require.Equal(t, tt.valid, colors.Valid(tt.v), "Valid(%q)", tt.v)
		require.Equal(t, tt.index, colors.Index(tt.v), "Index(%q)", tt.v)
	}
}

func TestParse(t *testing.T) {
	emptyIsRed := func(s string) string {
		if s == "" {
			return "RED"
		}
		return s
	}
	for _, tt := range []struct {
		name      string
		raw       string
		normalize func(string) string
		want      color
		wantErr   string
	}{
		{"exact", "GREEN", nil, "GREEN", ""},
		{"case-sensitive without normalize", "green", nil, "", "bad color: green"},
		{"spaces kept without normalize", " GREEN", nil, "", "bad color:  GREEN"},
		{"empty without normalize", "", nil, "", "bad color: "},
		{"unknown", "PURPLE", nil, "", "bad color: PURPLE"},
		{"trim and upper", " bLuE\t", enum.TrimUpperASCII, "BLUE", ""},
		{"error names the raw value", " purple ", enum.TrimUpperASCII, "", "bad color:  purple "},
		{"only ASCII folds", "ʀed", enum.TrimUpperASCII, "", "bad color: ʀed"},
		{"normalize maps empty", "", emptyIsRed, "RED", ""},
		{"normalize keeps others", "BLUE", emptyIsRed, "BLUE", ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, err := colors.Parse(tt.raw, tt.normalize, badColor)
			require.Equal(t, tt.want, got)
			if tt.wantErr == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, errBadColor)
			require.EqualError(t, err, tt.wantErr)
		})
	}
}

func TestTrimUpperASCII(t *testing.T) {
	for in, want := range map[string]string{
		"free":          "FREE",
		" Sage\n":       "SAGE",
		"guild_builder": "GUILD_BUILDER",
		"ſage":          "ſAGE", // long s stays: no Unicode case mapping
		"":              "",
	} {
		require.Equal(t, want, enum.TrimUpperASCII(in), "TrimUpperASCII(%q)", in)
	}
}

func TestNewPanicsOnDuplicate(t *testing.T) {
	require.Panics(t, func() { enum.New[color]("RED", "RED") })
}
