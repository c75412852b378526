package main

import (
	"context"
	"encoding/base64"
	"fmt"
	"strings"

	"github.com/dynabill/billing"
)

// runCursorKeys reads the collector's run cursor keys
// (billing.Config.RunCursorKeys) from RUN_CURSOR_KEYS, or from the Secrets
// Manager secret whose ARN is in RUN_CURSOR_KEYS_ARN: comma-separated
// standard base64, each at least billing.MinRunCursorKeyLen bytes once
// decoded (`openssl rand -base64 32` makes one), the signing key first.
// Neither set gives none: the cursors are then unsigned. The keys are
// never logged.
func runCursorKeys(ctx context.Context, sm func() secretGetter) ([][]byte, error) {
	v, err := secretFromEnv(ctx, sm, "RUN_CURSOR_KEYS", "RUN_CURSOR_KEYS_ARN")
	if err != nil || v == "" {
		return nil, err
	}
	var keys [][]byte
	for i, s := range strings.Split(v, ",") {
		k, err := base64.StdEncoding.DecodeString(strings.TrimSpace(s))
		if err != nil {
			return nil, fmt.Errorf("RUN_CURSOR_KEYS: key %d is not standard base64", i+1)
		}
		if len(k) < billing.MinRunCursorKeyLen {
			return nil, fmt.Errorf("RUN_CURSOR_KEYS: key %d is %d bytes, want at least %d (openssl rand -base64 32)", i+1, len(k), billing.MinRunCursorKeyLen)
		}
		keys = append(keys, k)
	}
	return keys, nil
}
