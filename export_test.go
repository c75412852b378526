package billing

import "slices"

// AdminStatuses returns the statuses a record must be in for op to change
// it (nil for an unknown op), for the tests of CheckChange.
func AdminStatuses(op AdminOp) []Status { return slices.Clone(adminOps[op].statuses) }
