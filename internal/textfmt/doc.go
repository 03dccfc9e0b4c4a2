// Package textfmt holds the little helpers the text forms of syncd's
// views share (the views' packages write their own text; these are the
// words and the table layout they have in common): a count with its noun,
// a duration and an instant as a person reads them, aligned columns.
package textfmt
