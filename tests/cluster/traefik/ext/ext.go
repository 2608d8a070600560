// Package ext is the extension point traefik's dynamic configuration embeds inline
// (pkg/config/dynamic: HTTPConfiguration and Router). In the open-source traefik it adds no
// fields, so two empty structs are all v3.7.13 needs from it.
package ext

// HTTP extends dynamic.HTTPConfiguration; no fields.
type HTTP struct{}

// Router extends dynamic.Router; no fields.
type Router struct{}
