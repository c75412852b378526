package dynamostore

// LockKey gives the external tests the lock item's key, which they read
// and write directly to stage crashed holders.
var LockKey = lockKey

// InvoicesTable is the table of an invoice store.
func InvoicesTable(s *Invoices) string { return s.table }
