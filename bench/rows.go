package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"reflect"
	"strings"
	"text/tabwriter"
)

// writeRows prints a slice of flat structs either as an aligned table whose
// header is the structs' json tag names, or (asJSON) as one JSON object per
// line. Every `herd bench …` command reports through it so that the table and
// the --json output always carry the same fields.
func writeRows(w io.Writer, asJSON bool, rows any) error {
	v := reflect.ValueOf(rows)
	if v.Kind() != reflect.Slice {
		return fmt.Errorf("writeRows: want a slice of structs, got %T", rows)
	}
	if asJSON {
		enc := json.NewEncoder(w)
		for i := 0; i < v.Len(); i++ {
			if err := enc.Encode(v.Index(i).Interface()); err != nil {
				return err
			}
		}
		return nil
	}
	t := v.Type().Elem()
	if t.Kind() != reflect.Struct {
		return fmt.Errorf("writeRows: want a slice of structs, got %T", rows)
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	var hdr []string
	for _, f := range reflect.VisibleFields(t) {
		if f.Anonymous && f.Type.Kind() == reflect.Struct {
			continue // its fields follow, as JSON flattens them
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "" {
			name = f.Name
		}
		hdr = append(hdr, name)
	}
	fmt.Fprintln(tw, strings.Join(hdr, "\t")+"\t")
	for i := 0; i < v.Len(); i++ {
		row := v.Index(i)
		var cells []string
		for _, f := range reflect.VisibleFields(t) {
			if !(f.Anonymous && f.Type.Kind() == reflect.Struct) {
				cells = append(cells, formatCell(row.FieldByIndex(f.Index)))
			}
		}
		fmt.Fprintln(tw, strings.Join(cells, "\t")+"\t")
	}
	return tw.Flush()
}

func formatCell(f reflect.Value) string {
	switch f.Kind() {
	case reflect.Pointer:
		if f.IsNil() {
			return "–" // a value that does not exist, as JSON's null
		}
		return formatCell(f.Elem())
	case reflect.Float32, reflect.Float64:
		x := f.Float()
		switch {
		case x == 0:
			return "0"
		case x >= 1e6 || x < 1e-2 && x > -1e-2:
			return fmt.Sprintf("%.4g", x)
		case x >= 100:
			return fmt.Sprintf("%.0f", x)
		default:
			return fmt.Sprintf("%.3f", x)
		}
	default:
		return fmt.Sprint(f.Interface())
	}
}
