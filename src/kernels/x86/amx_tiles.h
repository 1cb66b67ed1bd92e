/* amx_tiles.h - the AMX tile configuration ldtilecfg reads (palette 1: up
 * to 8 tiles of at most 16 rows x 64 bytes), shared by the *_amx.c kernels. */
#ifndef HM_AMX_TILES_H
#define HM_AMX_TILES_H

#include <stdint.h>

typedef struct {
    uint8_t palette, start_row, reserved[14];
    uint16_t colsb[16];
    uint8_t rows[16];
} hm_tilecfg;
_Static_assert(sizeof(hm_tilecfg) == 64, "ldtilecfg reads 64 bytes");

#endif
