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
