// Package memory implements the storage ports of package billing in
// memory. It is the embedded default: the examples, billingctl's local mode,
// a host's development server and unit tests use it where they would
// otherwise need a DynamoDB table. It passes the same conformance suites
// (package billingtest) as the DynamoDB stores of package dynamostore, and
// it fails the way they fail: conditional writes conflict, batches are
// bounded, status pages continue with opaque cursors, and values are copied
// in and out so that no caller can change what is stored.
//
// [New] returns a [Store] shaped like the legacy two tables;
// [NewSingleTable] models the single-table layout (its periods, history
// rows and subscription items, and the [Payments] view of the same data).
// Neither persists anything: a process that stops loses its records.
//
// The package links no AWS code: no aws-sdk-go-v2, smithy-go or dynamolock
// package, and not dynamostore. Items are encoded by the same codecs as
// the DynamoDB store's, over an attribute value model of their own that
// mirrors the SDK's ([AttributeValue] and its AttributeValueMember…
// kinds, which [Store.PutRawItem] takes). The option types are shared with
// dynamostore as aliases: [StatusIndexMode] and its constants,
// [SingleTableConfig], [MaxDueShards] and [DefaultLeaseDuration] are the
// same types and values under either package's name.
//
// [NewLocker] is the billing lock to go with them: per-user leases held in
// the process, with the DynamoDB locker's contract (a lock that is taken
// fails at once, a lease nobody renews runs out on the injected clock),
// checked by billingtest.TestLocker. It only keeps apart the holders of
// one process, so it suits one server or one test, never a fleet of
// Lambdas.
//
//	store, err := memory.New(memory.Options{})
//	if err != nil { ... } // options out of range
//	c, err := billing.NewCollector(billing.Config{
//		Repository: store.Repository(),
//		History:    store.History(),
//		Locker:     memory.NewLocker(memory.LockerOptions{}),
//		Provider:   processor,
//	})
package memory
