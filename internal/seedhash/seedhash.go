// Package seedhash turns the hash of a seeded decision into a draw, so the
// simulations and the scripted provider draw the same way.
package seedhash

// Unit maps a 64-bit hash (FNV, say) to a float in [0, 1). splitmix64's
// finalizer spreads the weak low-order bits of such hashes first.
func Unit(x uint64) float64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return float64(x>>11) / (1 << 53)
}
