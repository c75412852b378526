package dynamostore

import (
	"bytes"
	"context"
	"github.com/dynabill/billing/internal/av"
	"github.com/dynabill/billing/internal/sdkav"
	"log/slog"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/dynabill/billing"
	"github.com/dynabill/billing/internal/dynamotest"
	"github.com/dynabill/billing/internal/layout"
	"github.com/stretchr/testify/require"
)

// TestUserReadsSkipUndecodableItems: in both layouts a per-user read
// skips an item that does not decode, logs it at Warn with its key and
// reports it; Recent reads on past it, since DynamoDB's Limit counted it:
// Recent(1) over a newest item that does not decode makes a second query
// for the record.
func TestUserReadsSkipUndecodableItems(t *testing.T) {
	type stores struct {
		repo billing.Repository
		w    *dynamotest.Wrapper
		put  func(item map[string]types.AttributeValue) // a record's raw item
	}
	for _, c := range []struct {
		name    string
		user    string
		key     string // what the logged key starts with
		newRepo func(t *testing.T, logger *slog.Logger) stores
	}{
		{"Legacy", "u-skip", "user_id=u-skip billing_date=", func(t *testing.T, logger *slog.Logger) stores {
			f := newDynamoFixture(t, StatusIndexLegacy, 0, func(c *Config) { c.Logger = logger })
			return stores{f.repo, f.w, func(item map[string]types.AttributeValue) {
				_, err := f.w.PutItem(t.Context(), &dynamodb.PutItemInput{TableName: &f.cfg.Tables.Subscriptions, Item: item})
				require.NoError(t, err)
			}}
		}},
		{"SingleTable", "acct#S1#SKU9", "PK=ACC#acct SK=" + layout.PeriodSK(layout.SubscriptionRef{AccountID: "acct", SubscriptionID: "S1", SKU: "SKU9"}, ""), func(t *testing.T, logger *slog.Logger) stores {
			client := dynamotest.Client(t)
			table := SingleTableConfig{Table: dynamotest.TableName(t, "payments"), AccountPrefix: "ACC#", TTLAttribute: "TTL"}
			dynamotest.CreateTable(t, client, SingleTableDefinition(table))
			w := dynamotest.Wrap(client)
			t.Cleanup(func() { w.AssertNoViolations(t) })
			repo, err := NewSingleTableRepository(SingleTableStoreConfig{Client: w, Table: table, Logger: logger,
				Clock: billing.ClockFunc(func() time.Time { return time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC) })})
			require.NoError(t, err)
			return stores{repo, w, func(item map[string]types.AttributeValue) {
				ref, err := layout.ParseSubscriptionRef(stringOf(item[layout.AttrUserID]))
				require.NoError(t, err)
				item[layout.AttrPK] = stringAV(repo.tbl.AccountPK(ref.AccountID))
				item[layout.AttrSK] = stringAV(layout.PeriodSK(ref, stringOf(item[layout.AttrBillingDate])))
				item[layout.PayEntity] = stringAV(layout.EntityPeriod)
				_, err = w.PutItem(t.Context(), &dynamodb.PutItemInput{TableName: &table.Table, Item: item})
				require.NoError(t, err)
			}}
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			var logs bytes.Buffer
			s := c.newRepo(t, slog.New(slog.NewTextHandler(&logs, nil)))
			good := []billing.Period{testRecord(c.user, 0, billing.StatusCompleted), testRecord(c.user, 1, billing.StatusCompleted)}
			for i := range good {
				require.NoError(t, s.repo.Add(t.Context(), &good[i]))
			}
			bad := testRecord(c.user, 2, billing.StatusCompleted) // the newest
			item, err := layout.EncodeItem(&bad)
			require.NoError(t, err)
			item[layout.AttrBillingAmount] = &av.AttributeValueMemberS{Value: "4,99"}
			s.put(sdkav.ToSDK(item))

			var reported []error
			ctx := billing.WithInvalidItems(t.Context(), func(_ context.Context, err error) { reported = append(reported, err) })
			s.w.Reset()
			got, err := s.repo.Recent(ctx, c.user, 1)
			require.NoError(t, err, "Recent over an undecodable item")
			require.Len(t, got, 1, "Recent(1)")
			require.Equal(t, good[1].SubscriptionID, got[0].SubscriptionID, "Recent(1): the newest good record")
			require.Equal(t, 2, s.w.Calls("Query"), "Recent(1) reads on past the bad item: %v", s.w.Log())
			require.Len(t, reported, 1, "items reported")
			require.ErrorIs(t, reported[0], billing.ErrInvalidItem)

			require.Contains(t, logs.String(), `level=WARN msg="billing: skipping undecodable item"`)
			require.Contains(t, logs.String(), `key="`+c.key, "the log names the item's key: %s", logs.String())
			require.Contains(t, logs.String(), layout.BillingDateKey(&bad), "the log names the item's key: %s", logs.String())
			require.Contains(t, logs.String(), "attribute=billing_amount")
		})
	}
}
