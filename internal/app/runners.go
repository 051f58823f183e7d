package app

import "errors"

var errDevUnavailable = errors.New("talon dev needs the coordinator and worker runtimes, which are not in this build yet")

func defaultRunners() Runners { return Runners{} }
