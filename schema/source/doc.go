// Package source owns where a capacity repository is read from: a directory, or a
// Git ref of the repository that contains it, read from Git's objects without
// touching the work tree. Both are returned as an fs.FS for schema.Load.
package source
