package all

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// Verify checks the shape of what a run wrote under out, against before
// (BENCHMARKS.md as it was, with its markers): every byte outside the
// generated block kept, a section per suite in the block, the JSON report
// parsing with every suite and the machine, each plot well-formed XML
// whose root is an svg element.
func Verify(out string, before []byte) error {
	doc, err := os.ReadFile(filepath.Join(out, DocFile))
	if err != nil {
		return err
	}
	b1, a1, err := outside(before)
	if err != nil {
		return fmt.Errorf("before: %w", err)
	}
	b2, a2, err := outside(doc)
	if err != nil {
		return fmt.Errorf("%s: %w", DocFile, err)
	}
	if !bytes.Equal(b1, b2) || !bytes.Equal(a1, a2) {
		return fmt.Errorf("%s changed outside the generated block", DocFile)
	}
	for _, h := range []string{"### graft", "### accept", "### sync enqueue", "### archive", "### Redis memory", "### object-store requests"} {
		if !bytes.Contains(doc, []byte(h)) {
			return fmt.Errorf("%s: the generated block has no %q", DocFile, h)
		}
	}
	raw, err := os.ReadFile(filepath.Join(out, JSONFile))
	if err != nil {
		return err
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		return fmt.Errorf("%s: %w", JSONFile, err)
	}
	for _, k := range append([]string{"command", "started", "elapsed_ns", "machine", "plots"}, SuiteKeys...) {
		if v, ok := m[k]; !ok || string(v) == "null" {
			return fmt.Errorf("%s: key %q missing or null", JSONFile, k)
		}
	}
	var mach map[string]any
	if err := json.Unmarshal(m["machine"], &mach); err != nil {
		return fmt.Errorf("%s: machine: %w", JSONFile, err)
	}
	for _, k := range []string{"nproc", "kernel", "load_start", "load_end"} {
		if _, ok := mach[k]; !ok {
			return fmt.Errorf("%s: machine has no %q", JSONFile, k)
		}
	}
	for _, p := range []string{PlotAccept, PlotMerge, PlotSync, PlotPeers} {
		if err := verifySVG(filepath.Join(out, p)); err != nil {
			return err
		}
	}
	return nil
}

// outside returns what lies before the Begin marker and from the End marker.
func outside(b []byte) (before, after []byte, err error) {
	i, j := bytes.Index(b, []byte(Begin)), bytes.Index(b, []byte(End))
	if i < 0 || j < i {
		return nil, nil, errors.New("the generated block's markers are missing")
	}
	return b[:i], b[j:], nil
}

func verifySVG(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	d, root := xml.NewDecoder(f), ""
	for {
		tok, err := d.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return fmt.Errorf("%s: not well-formed XML: %w", path, err)
		}
		if se, ok := tok.(xml.StartElement); ok && root == "" {
			root = se.Name.Local
		}
	}
	if root != "svg" {
		return fmt.Errorf("%s: root element %q, want svg", path, root)
	}
	return nil
}
