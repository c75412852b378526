package main

import (
	"net"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestAddrInUseNamesTheFlag: an address in use refuses the console with
// an error that names the address and says to pass -addr.
func TestAddrInUseNamesTheFlag(t *testing.T) {
	t.Parallel()
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer taken.Close()
	err = run(t.Context(), options{Users: 5, Months: 1, Seed: 1}, taken.Addr().String(), "operator")
	require.ErrorIs(t, err, syscall.EADDRINUSE)
	assert.Contains(t, err.Error(), taken.Addr().String())
	assert.Contains(t, err.Error(), "pass -addr with a free address")
}
