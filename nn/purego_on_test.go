//go:build purego

package nn

const purego = true
