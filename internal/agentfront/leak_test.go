package agentfront

import (
	"testing"

	"github.com/spacefix/spacefix/internal/leaktest"
)

// TestMain fails the package's tests when goroutines outlive them: a
// connection's writer ends with the connection.
func TestMain(m *testing.M) { leaktest.Main(m) }
