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
//	store := memory.New(memory.Options{})
//	c, err := billing.NewCollector(billing.Config{
//		Repository: store.Repository(),
//		History:    store.History(),
//		Locker:     billingtest.NewLocker(nil, time.Minute),
//		Provider:   processor,
//	})
package memory
