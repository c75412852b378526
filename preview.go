package billing

import (
	"context"
	"time"

	"github.com/dynabill/billing/internal/hooks"
)

// The engine's dry runs (what a run would do with a period, whether a
// change, a reactivation or a sign-up would be accepted) are for the
// library's own operator tools, through internal/preview; a host calls the
// operations themselves, which check the same rules under the user's lock.
func init() {
	hooks.PlanPeriod = func(c *Collector, kind RunKind, p *Period, now time.Time) (string, string) {
		pl := c.planRecord(kind, p, now)
		return string(pl.Action), pl.Reason
	}
	hooks.RunQueries = func(c *Collector, kind RunKind, at time.Time) ([]StatusQuery, error) {
		return c.runQueries(kind, at)
	}
	hooks.CheckChange = func(c *Collector, ctx context.Context, op string, months int, date time.Time,
		tier string, amount Amount, recs []Period, p *Period) error {
		return c.checkChange(ctx, adminChange{Op: opName(op), Months: months, Date: date,
			Tier: tier, Amount: amount, UserRecords: recs}, p)
	}
	hooks.CanReactivate = func(c *Collector, userID string, recs []Period, date time.Time) error {
		return c.canReactivate(userID, recs, date)
	}
	hooks.CheckSubscribe = func(c *Collector, ctx context.Context, req SubscribeRequest, recs []Period) (Subscribed, error) {
		return c.checkSubscribe(ctx, req, recs)
	}
}
