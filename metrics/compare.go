package metrics

import (
	"bytes"
	"encoding/csv"
	"fmt"
	"slices"
	"strings"
)

// DropWallColumns returns a metrics.csv with the wall-clock columns
// (WallColumns) removed, for determinism checks: two runs with the same
// seed must give identical results.
func DropWallColumns(data []byte) (string, error) {
	rows, err := csv.NewReader(bytes.NewReader(data)).ReadAll()
	if err != nil {
		return "", fmt.Errorf("metrics: %w", err)
	}
	if len(rows) == 0 {
		return "", nil
	}
	wall := WallColumns()
	var keep []int
	for i, c := range rows[0] {
		if !slices.Contains(wall, c) {
			keep = append(keep, i)
		}
	}
	var b strings.Builder
	for _, r := range rows {
		for j, i := range keep {
			if j > 0 {
				b.WriteByte(',')
			}
			b.WriteString(r[i])
		}
		b.WriteByte('\n')
	}
	return b.String(), nil
}
