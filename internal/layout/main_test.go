package layout

import (
	"testing"

	"github.com/dynabill/billing/internal/dynamotest"
)

func TestMain(m *testing.M) { dynamotest.Main(m) }
