package dynamostore

// LockKey gives the external tests the lock item's key, which they read
// and write directly to stage crashed holders.
var LockKey = lockKey
