/* The hook's own threads: the pod manager watcher (ipc.c), each device's renewer
 * (token_fetch.c) and tracker (token_tracker.c). */
#include "internal.h"

#include <signal.h>

int gem_thread_start(void *(*fn)(void *), void *arg)
{
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    pthread_t t;
    int rc = pthread_create(&t, NULL, fn, arg);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc == 0)
        pthread_detach(t);
    return rc;
}
