// Package class is the teacher's view of a whole class: a roster of
// students (one TOML file per class in the teacher's config directory,
// classes/NAME.toml, meant to be edited by hand too) and the status of
// every student at once, asked of each student's gate over SSH with the
// teacher's automation key.
//
// Threat model: the roster is the teacher's own file, but every byte a
// student's machine answers is untrusted. A student's gate (or whatever
// sits behind that SSH account) may send garbage, endless output, or
// nothing at all; so each student's probe is bounded in time and in bytes,
// its strings are cut to one clean line before anything shows them, and
// one student's failure never delays or changes another's row.
package class
