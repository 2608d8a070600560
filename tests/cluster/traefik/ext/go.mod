// Stand-in for traefik's nested module pkg/config/dynamic/ext (not in the v3 module zip: Go
// leaves nested modules out, and the proxy cannot serve it under this path). go.mod replaces
// github.com/traefik/traefik/dynamic/ext with this directory, as traefik's own go.mod does
// with ./pkg/config/dynamic/ext.
module github.com/traefik/traefik/dynamic/ext

go 1.26.0
