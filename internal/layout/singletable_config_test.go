package layout

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestSingleTableConfigCheckEngine(t *testing.T) {
	for _, tc := range []struct {
		prefix string
		clash  bool
	}{
		{DefaultAccountPrefix, false},
		{"ACC#", false},
		{"PERIODID#", true},
		{"PERIODID#X", true}, // account X1 would share pointer partition PERIODID#X1 of period X1
		{"PERIODIDX", false},
		{"PERIOD", true},
		{"P", true},
	} {
		t.Run(tc.prefix, func(t *testing.T) {
			err := SingleTableConfig{AccountPrefix: tc.prefix}.WithDefaults().CheckEngine("cfg")
			if !tc.clash {
				require.NoError(t, err)
				return
			}
			require.Error(t, err)
			assert.Equal(t, `cfg.AccountPrefix "`+tc.prefix+`" clashes with "PERIODID#"`, err.Error())
		})
	}
}
