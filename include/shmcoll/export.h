/* SHMCOLL_API marks the public API: libshmcoll.so exports exactly these symbols (it is built with
 * hidden visibility), so nothing internal becomes part of its ABI. */
#ifndef SHMCOLL_EXPORT_H
#define SHMCOLL_EXPORT_H
#define SHMCOLL_API __attribute__((visibility("default")))
#endif
