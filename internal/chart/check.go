package chart

import (
	"bytes"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
)

// Count parses doc, an SVG document, as strict XML and counts its elements
// by local name. It fails unless doc is well-formed, has one root, an svg
// element in the SVG namespace with a width, a height and a viewBox, and
// closes every element it opens.
func Count(doc []byte) (map[string]int, error) {
	d := xml.NewDecoder(bytes.NewReader(doc))
	d.Strict = true
	elements := map[string]int{}
	depth, roots := 0, 0
	for {
		tok, err := d.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("not well-formed XML: %w", err)
		}
		switch tok := tok.(type) {
		case xml.StartElement:
			if depth == 0 {
				roots++
				if err := checkRoot(tok); err != nil {
					return nil, err
				}
			}
			depth++
			elements[tok.Name.Local]++
		case xml.EndElement:
			depth--
		}
	}
	if depth != 0 || roots != 1 {
		return nil, fmt.Errorf("unbalanced document: depth %d at its end, %d root elements", depth, roots)
	}
	return elements, nil
}

func checkRoot(root xml.StartElement) error {
	if root.Name.Local != "svg" || root.Name.Space != "http://www.w3.org/2000/svg" {
		return fmt.Errorf("root element %v, want svg in the SVG namespace", root.Name)
	}
	attrs := map[string]string{}
	for _, a := range root.Attr {
		attrs[a.Name.Local] = a.Value
	}
	for _, name := range []string{"width", "height", "viewBox"} {
		if attrs[name] == "" {
			return fmt.Errorf("the svg element has no %s", name)
		}
	}
	return nil
}
