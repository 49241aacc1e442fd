// Package deploy holds the tests of what Spacefix ships for deployment:
// the Helm chart in helm/spacefix, rendered with Helm's own library and
// decoded strictly into Kubernetes' API types, and the compose file in
// compose/, loaded with the Compose specification's own loader.
//
// It is a module of its own so that Helm's and Kubernetes' many
// dependencies never enter the gateway's module graph.
package deploy
