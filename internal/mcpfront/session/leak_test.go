package session

import (
	"testing"

	"github.com/spacefix/spacefix/internal/leaktest"
)

// TestMain fails the package's tests when goroutines outlive them.
func TestMain(m *testing.M) { leaktest.Main(m) }
