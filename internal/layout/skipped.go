package layout

import (
	"context"
	"errors"
	"log/slog"

	"github.com/dynabill/billing"
)

// SkipItem is what a per-user read (ListByUser, Recent, History.ListByUser)
// of either store does with an item that does not decode, instead of
// failing: it logs err at Warn on logger (nil: not logged) with the item's
// key, and reports it through [billing.ReportInvalidItem]. err is the
// decoder's [*billing.FieldError], which names the attribute and the key.
//
// The caller holds no lock of its store: the function ctx carries may
// read the store again.
func SkipItem(ctx context.Context, logger *slog.Logger, op string, err error) {
	if logger != nil {
		attrs := []any{"op", op, "error", err}
		if fe := (*billing.FieldError)(nil); errors.As(err, &fe) {
			attrs = append(attrs, "key", fe.Key, "attribute", fe.Field)
		}
		logger.WarnContext(ctx, "billing: skipping undecodable item", attrs...)
	}
	billing.ReportInvalidItem(ctx, err)
}
