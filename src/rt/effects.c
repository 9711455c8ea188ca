/* effects.c — the effects barrier. Execution is synchronous on the calling
 * thread, so every effect issued so far has already run: there is nothing to
 * wait for until the runtime runs programs on device streams. */
#include "internal.h"

oly_status oly_effects_barrier(void) { return OLY_OK; }
