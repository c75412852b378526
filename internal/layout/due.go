package layout

import (
	"hash/fnv"
	"strconv"

	"github.com/dynabill/billing"
)

// AttrDue is the partition key of the sharded due index on the legacy
// table and on the single table's period items: "<billing_status>#<shard>"
// on records a run may act on (see DueStatus), absent on every other
// record (and on the single table's history rows and ID pointers), so the
// index holds exactly the records runs read.
const AttrDue = "billing_due"

// DueShard is the shard of userID's records among k: FNV-1a of the user ID
// modulo k, so every record of a user (and the user's lock) is in one
// shard. k <= 1 is one shard, 0.
func DueShard(userID string, k int) int {
	if k <= 1 {
		return 0
	}
	h := fnv.New32a()
	_, _ = h.Write([]byte(userID))
	return int(h.Sum32() % uint32(k))
}

// DueStatus reports whether records in st carry the due index key: the
// statuses a run reads (SCHEDULED, ERROR, PAUSED, and ACHSENT for the
// settlement deadline).
func DueStatus(st billing.Status) bool {
	switch st {
	case billing.StatusScheduled, billing.StatusError, billing.StatusPaused, billing.StatusACHSent:
		return true
	}
	return false
}

// DueKey is the due index partition key of status st in shard.
func DueKey(st billing.Status, shard int) string {
	return string(st) + "#" + strconv.Itoa(shard)
}
