// Package dynamotest runs integration tests against a real DynamoDB-compatible
// server on loopback and instruments the client the code under test uses.
// It is test support for this module: import it only from _test files.
//
// # Server
//
// [Client] returns a *dynamodb.Client for $DYNAMODB_ENDPOINT when it is set
// (DynamoDB Local: docker run -p 8000:8000 amazon/dynamodb-local, then
// DYNAMODB_ENDPOINT=http://localhost:8000). Otherwise the first call in a test
// binary starts moto_server (pip install "moto[server]") on a free loopback
// port and waits, at most 30 s, until GET / answers; every later call in the
// binary reuses it. [Main] stops it after the tests. The server cannot outlive
// the binary even without Main or when the binary is killed: it is started
// with Pdeathsig=SIGKILL from an OS thread that lives as long as the server.
//
// Without either, tests skip with a message saying how to get a server;
// under CI=true they fail instead, so CI never passes by skipping.
//
// moto keeps everything in memory and tests run in parallel: each test
// creates its own tables with [TableName] and [CreateTable], which deletes
// them when the test ends.
//
// # Wrapper
//
// Storage adapters take the narrow [API] interface, which *dynamodb.Client
// satisfies. [Wrap] returns a [Wrapper] that implements API too and
//
//   - counts calls per operation ([Wrapper.Calls], [Wrapper.TotalCalls],
//     [Wrapper.Log]), items read and written, and read and write capacity
//     units computed from item sizes (below);
//   - enforces DynamoDB limits itself, whatever the server does: a request
//     that breaks one fails with a [*LimitError] before it reaches the server
//     and is recorded in [Wrapper.Violations]. Limits: 1 to 25 requests in a
//     BatchWriteItem, 1 to 100 keys in a BatchGetItem, 1 to 100 actions in a
//     transaction, no two transaction actions on the same item, items up to
//     400 KB, Query and Scan Limit at least 1 and pages up to 1 MB;
//   - injects faults: [Wrapper.FailNth], [Wrapper.FailAfterInner],
//     [Wrapper.Throttle], [Wrapper.Unprocessed], [Wrapper.Hang].
//
// # Capacity
//
// Writes cost 1 WCU per started KB (1024 bytes) of item, doubled inside
// TransactWriteItems; reads 1 RCU per started 4 KB for a consistent read,
// half for an eventually consistent one, doubled inside TransactGetItems,
// and at least one unit per item (a miss costs the minimum). Item sizes
// follow DynamoDB's rules, see [ItemSize]. The wrapper sees requests and
// responses, not stored items, so it approximates:
//
//   - PutItem: the new item, or the old one if ReturnValues=ALL_OLD returns
//     a larger one (DynamoDB charges the larger of the two);
//   - UpdateItem: the key plus the expression attribute names and values, or
//     the returned image if larger; DeleteItem: the key, or the returned old
//     item if larger; a transaction ConditionCheck: its key, as a write;
//   - Query and Scan: the summed size of the returned page, rounded up once.
//     DynamoDB charges what it read before the filter and the projection, so
//     pages with a FilterExpression, a ProjectionExpression or Select=COUNT
//     are under-counted. ItemsRead uses ScannedCount, which is exact.
//
// # moto
//
// Seen with moto 5.2.1: it accepts BatchWriteItem with 26 or 0 requests,
// transactions with 0 actions, two transactional gets of one item and a
// negative Limit; Limit 0 makes it answer HTTP 500. It rejects like DynamoDB
// more than 100 transaction actions or batch keys and two transaction writes
// on one item, but it also rejects, wrongly, a BatchWriteItem with the same
// key in two different tables, and items over 405000 bytes (DynamoDB allows
// 409600). It stops Query and Scan pages at 1000000 bytes itself. Its
// ScannedCount is right, filters and GSIs included.
//
// # Example
//
//	func TestMain(m *testing.M) { dynamotest.Main(m) }
//
//	func TestRetryAfterThrottle(t *testing.T) {
//		t.Parallel()
//		db := dynamotest.Client(t) // skips (fails under CI=true) without a server
//		table := dynamotest.TableName(t, "billing-activity")
//		dynamotest.CreateTable(t, db, &dynamodb.CreateTableInput{
//			TableName:            aws.String(table),
//			AttributeDefinitions: []types.AttributeDefinition{ /* user_id, billing_date */ },
//			KeySchema:            []types.KeySchemaElement{ /* HASH user_id, RANGE billing_date */ },
//			BillingMode:          types.BillingModePayPerRequest,
//		})
//
//		w := dynamotest.Wrap(db)
//		w.Throttle("TransactWriteItems", 2)         // the next two transactions are throttled
//		w.FailAfterInner("PutItem", 1, context.DeadlineExceeded) // applied, but the caller times out
//
//		repo := newRepository(w, table) // any adapter taking a dynamotest.API-shaped interface
//		// ... exercise repo, assert the invariants ...
//
//		w.AssertNoViolations(t)
//		t.Logf("%v; %.1f WCU per write call", w, w.WriteCapacity()/float64(w.Calls("TransactWriteItems")))
//	}
package dynamotest
