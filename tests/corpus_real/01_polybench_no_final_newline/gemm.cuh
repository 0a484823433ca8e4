// Problem sizes and element type for the GEMM benchmark; each can be overridden with -D on the command line.
#ifndef GEMM_CUH
#define GEMM_CUH

#ifndef SIZE_NI
#define SIZE_NI 4096
#endif
#ifndef SIZE_NJ
#define SIZE_NJ 4096
#endif
#ifndef SIZE_NK
#define SIZE_NK 4096
#endif

#define DATA_TYPE float

#define TILE_X 32
#define TILE_Y 8

#define ALPHA 1.5f
#define BETA 1.2f

#endif
