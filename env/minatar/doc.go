// Package minatar holds exact Go versions of MinAtar's five games.
package minatar
