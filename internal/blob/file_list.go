package blob

import (
	"context"
	"errors"
	"io/fs"
	"path/filepath"
	"strings"
)

// errListFull stops a walk once max keys are found and one more exists.
var errListFull = errors.New("list full")

// List implements Lister: the regular files below the store's directory
// whose keys (slash-separated paths) start with prefix, in key order.
func (s *File) List(ctx context.Context, prefix string, max int) ([]string, bool, error) {
	keys := Keys{Max: max}
	more := false
	root := s.dir
	// Walk only the directory the prefix names, when it names one.
	if i := strings.LastIndexByte(prefix, '/'); i >= 0 {
		root = filepath.Join(s.dir, filepath.FromSlash(prefix[:i]))
	}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		if ctxErr := ctx.Err(); ctxErr != nil {
			return ctxErr
		}
		if !d.Type().IsRegular() {
			return nil
		}
		rel, err := filepath.Rel(s.dir, path)
		if err != nil {
			return err
		}
		key := filepath.ToSlash(rel)
		if !strings.HasPrefix(key, prefix) {
			return nil
		}
		if keys.Add(key) {
			more = true
			return errListFull
		}
		return nil
	})
	if err != nil && !errors.Is(err, errListFull) {
		return nil, false, s.mapErr(prefix, err)
	}
	return keys.List, more, nil
}

var _ Lister = (*File)(nil)
