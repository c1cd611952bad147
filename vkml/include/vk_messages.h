/* Validation-layer messages, collected in C and raised in Python at the next API boundary.
 *
 * Why C: the debug-utils callback runs inside whatever Vulkan call triggered it, on any
 * thread, often with the GIL released; it must not touch Python objects. It copies the text
 * into this mutex-protected queue; vkml/vulkan/_instance.pyx drains it after each call and
 * raises vkml.vulkan.ValidationError carrying the text.
 *
 * Included by exactly one extension module (_instance), so the static state is unique.
 */
#ifndef VKML_VK_MESSAGES_H
#define VKML_VK_MESSAGES_H

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define VKML_MSG_CAP 32          /* messages kept until drained; later ones are only counted */
#define VKML_MSG_MAXLEN 8192     /* each message is truncated to this many bytes */

static pthread_mutex_t vkml_msg_lock = PTHREAD_MUTEX_INITIALIZER;
static char *vkml_msg_text[VKML_MSG_CAP];
static int vkml_msg_count = 0;    /* stored */
static int vkml_msg_dropped = 0;  /* arrived while full */
static volatile int vkml_msg_any = 0;  /* cheap unlocked check for the fast path */

static void vkml_msg_push(uint32_t severity, const char *id, const char *text) {
    const char *sev = severity >= 0x1000 ? "ERROR" : severity >= 0x100 ? "WARNING" : "INFO";
    if (!id) id = "";
    if (!text) text = "";
    size_t n = strlen(sev) + strlen(id) + strlen(text) + 8;
    if (n > VKML_MSG_MAXLEN) n = VKML_MSG_MAXLEN;
    char *copy = (char *)malloc(n);
    if (copy) {
        size_t pos = 0;
        const char *parts[5] = {sev, " [", id, "] ", text};
        for (int i = 0; i < 5 && pos + 1 < n; i++) {
            size_t len = strlen(parts[i]);
            if (pos + len + 1 > n) len = n - pos - 1;
            memcpy(copy + pos, parts[i], len);
            pos += len;
        }
        copy[pos] = '\0';
    }
    pthread_mutex_lock(&vkml_msg_lock);
    if (copy && vkml_msg_count < VKML_MSG_CAP) {
        vkml_msg_text[vkml_msg_count++] = copy;
        copy = NULL;
    } else {
        vkml_msg_dropped++;
    }
    vkml_msg_any = 1;
    pthread_mutex_unlock(&vkml_msg_lock);
    free(copy);
}

static int vkml_msg_pending(void) { return vkml_msg_any; }

/* Moves the stored messages out (the caller frees each string and the array via free()). */
static int vkml_msg_take(char ***out, int *dropped) {
    pthread_mutex_lock(&vkml_msg_lock);
    int n = vkml_msg_count;
    char **arr = NULL;
    if (n) {
        arr = (char **)malloc(sizeof(char *) * (size_t)n);
        if (arr) {
            memcpy(arr, vkml_msg_text, sizeof(char *) * (size_t)n);
        } else {
            for (int i = 0; i < n; i++) free(vkml_msg_text[i]);
            n = 0;
        }
    }
    *dropped = vkml_msg_dropped;
    vkml_msg_count = 0;
    vkml_msg_dropped = 0;
    vkml_msg_any = 0;
    pthread_mutex_unlock(&vkml_msg_lock);
    *out = arr;
    return n;
}

#endif
