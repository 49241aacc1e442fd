package identity

// ReusedLen is how many tokens s keeps for reuse.
func ReusedLen(s *Signer) int { return s.reuse.len() }

// SetMaxReused bounds the tokens kept for reuse to n until the returned
// func restores the bound.
func SetMaxReused(n int) (restore func()) {
	old := maxReused
	maxReused = n
	return func() { maxReused = old }
}
