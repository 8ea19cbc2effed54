package runconfig

import (
	"reflect"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"
)

// TestBaseCopiesShareNothing: loadBase hands out copies of one parsed base
// per line and distribution; no map, slice or pointer of a copy may be the
// base's (an edit for one stack would reach the next), but the yaml.Nodes
// of Extra, which the pipeline never edits.
func TestBaseCopiesShareNothing(t *testing.T) {
	for _, l := range lines {
		for _, d := range LineDistributions(l.line) {
			first, err := loadBase(l.line, d)
			require.NoError(t, err)
			key := baseKey{l.line, d}
			parsed, ok := bases.Load(key)
			require.True(t, ok, "%s %s: the parsed base is not kept", l.line.Tag(), d)
			second, err := loadBase(l.line, d)
			require.NoError(t, err)
			require.Equal(t, parsed, first, "%s %s", l.line.Tag(), d)
			require.Equal(t, first, second, "%s %s", l.line.Tag(), d)
			var shared []string
			sharedMemory(reflect.ValueOf(parsed), reflect.ValueOf(first), l.line.Tag()+" "+d, &shared)
			sharedMemory(reflect.ValueOf(first), reflect.ValueOf(second), l.line.Tag()+" "+d, &shared)
			require.Empty(t, shared, "parts of a base config's copies are the same memory")
		}
	}
}

var yamlNode = reflect.TypeFor[*yaml.Node]()

// sharedMemory appends the paths at which a and b, values of one type,
// hold the same map, slice array or pointer.
func sharedMemory(a, b reflect.Value, path string, out *[]string) {
	switch a.Kind() {
	case reflect.Interface:
		if !a.IsNil() && !b.IsNil() && a.Elem().Type() == b.Elem().Type() {
			sharedMemory(a.Elem(), b.Elem(), path, out)
		}
	case reflect.Pointer:
		if a.IsNil() || b.IsNil() || a.Type() == yamlNode {
			return
		}
		if a.Pointer() == b.Pointer() {
			*out = append(*out, path)
		}
		sharedMemory(a.Elem(), b.Elem(), path, out)
	case reflect.Map:
		if a.IsNil() || b.IsNil() {
			return
		}
		if a.Pointer() == b.Pointer() {
			*out = append(*out, path)
		}
		for _, k := range a.MapKeys() {
			if v := b.MapIndex(k); v.IsValid() {
				sharedMemory(a.MapIndex(k), v, path+"."+k.String(), out)
			}
		}
	case reflect.Slice:
		if a.Len() == 0 || b.Len() == 0 {
			return
		}
		if a.Pointer() == b.Pointer() {
			*out = append(*out, path)
		}
		for i := range min(a.Len(), b.Len()) {
			sharedMemory(a.Index(i), b.Index(i), path+"["+strconv.Itoa(i)+"]", out)
		}
	case reflect.Struct:
		for i := range a.NumField() {
			sharedMemory(a.Field(i), b.Field(i), path+"."+a.Type().Field(i).Name, out)
		}
	}
}
