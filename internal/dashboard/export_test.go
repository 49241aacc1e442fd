package dashboard

import (
	"strings"

	"github.com/spacefix/spacefix/internal/store"
)

// Route is one admin API route and what it needs, for the tests that walk
// the route table.
type Route struct {
	Method, Path string
	Role         store.Role // "" for routes outside a project
	Admin        bool       // only instance admins
}

// Routes is the admin API's route table.
func Routes() []Route {
	var out []Route
	for _, rt := range (&Dashboard{}).apiRoutes() {
		method, path, _ := strings.Cut(rt.pattern, " ")
		out = append(out, Route{method, path, rt.need.role, rt.need.admin})
	}
	return out
}
