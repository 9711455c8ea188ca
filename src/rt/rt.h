/* rt.h — declarations private to the runtime (src/rt/) and its tests: the
 * kernel thread pool (pool.c), device streams (stream.c) and group runs
 * (group.c). */
#ifndef OLYMPUS_RT_H
#define OLYMPUS_RT_H

#include "exec/exec.h"

/* Decides the pool's size once (OLYMPUS_NUM_THREADS, else the CPUs this
 * process may use) and lends the pool to the executor when that is more than
 * one thread (oly__exec_set_pool); the streams call it when they start.
 * Workers start on the first split. Thread-safe. */
void oly__pool_install(void);
/* The pool's size, the calling thread included. */
int oly__pool_threads(void);
/* Tests: resizes the pool (stops and joins its workers first; 1: no pool). */
void oly__pool_set_threads(int threads);
/* OLYMPUS_NUM_THREADS's value: 0 (use the default) for NULL, empty or not a
 * positive integer; at most 256. */
int oly__pool_parse_threads(const char *s);

/* Waits until the runs queued on device's stream before the call have
 * finished (nothing when the calling thread runs on that stream). */
void oly__stream_drain(int device);
/* The device whose stream the calling thread runs on, or -1. */
int oly__stream_running_device(void);
/* Starts the streams (and lends the executor the pool and the group
 * launcher) when that has not happened yet. */
void oly__stream_install(void);
/* Lends the executor the group launcher (group.c). Thread-safe. */
void oly__group_install(void);

#endif /* OLYMPUS_RT_H */
