package billing

import "slices"

// AdminStatuses returns the statuses a record must be in for op to change
// it (nil for an unknown op), for the tests of checkChange.
func AdminStatuses[S ~string](op S) []Status { return slices.Clone(adminOps[opName(op)].statuses) }

// StaleMargin is how much newer than the stale limit a date set by a
// caller must be, for the tests of the date checks.
const StaleMargin = staleMargin

// AddReport adds the counts and failures of o to r, as a run adds its
// records' reports, for the tests that sum a run's invocations.
func AddReport(r, o *Report) { r.add(o) }

// Helpers unexported from the API that this package's external tests use.
var (
	AddBillingPeriods     = addBillingPeriods
	CanTransition         = canTransition
	CheckStatusTransition = checkTransition
	// FirstAfterTrial is the collector's test of a trial still running on
	// the first paid period, which package notice's messages repeat.
	FirstAfterTrial = firstAfterTrial
)

// EventSinkFunc adapts a function to EventSink in the external tests.
type EventSinkFunc = eventSinkFunc
