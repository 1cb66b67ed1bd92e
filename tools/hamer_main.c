/* hamer_main.c - the `hamer` command: its table of subcommands, dispatching
 * to tools/cli (cli_*.c), tools/serve and tools/worker. Above all three, so
 * that none of them needs another. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "cli/cli.h"
#include "common/common.h"
#include "hamer.h"
#include "serve/server.h"
#include "worker/worker.h"

static const char *USAGE_MAIN =
    "usage: hamer <command> [options]\n"
    "\n"
    "HaMeR 3D hand-mesh recovery (CVPR 2024) in C.\n"
    "\n"
    "commands:\n"
    "  run       a photo in (hands found, or boxes given): RESULT.json, meshes (.obj), pictures\n"
    "  batch     a folder of photos in, a folder of results out (model loaded once; resumable)\n"
    "  detect    find the hands in a photo: boxes, scores, 21 landmarks (JSON), a picture\n"
    "  video     a video in: hands tracked, regressed and smoothed per frame (JSON Lines), an overlay video\n"
    "  live      a camera, a stream or a file at its pace: hands as they come (JSON Lines, latency, drops)\n"
    "  regress   run the regressor on ready crops (.npy) and write an .npz\n"
    "  crop      cut hand crops (.npy) from an image and boxes\n"
    "  bench     time the regressor (per stage) and check a precision against fp32\n"
    "  serve     HTTP server: POST an image + boxes, get RESULT.json or the overlay PNG\n"
    "  convert   write a packed model file (weights in kernel layout; loads in < 1 s)\n"
    "  worker    take jobs from a Redis stream (consumer group), answer on a results stream\n"
    "  submit    add a job (an image, boxes) to the Redis jobs stream\n"
    "  results   print the results stream (--follow), or a summary of the queue (--stats)\n"
    "\n"
    "main job:\n"
    "  hamer regress --model hamer.ckpt --input CROPS.npy --output OUT.npz\n"
    "  hamer run --model hamer.ckpt --image IMG --output RESULT.json [--box x1,y1,x2,y2[:left]]\n"
    "\n"
    "options:\n"
    "  -h, --help      this help; 'hamer <command> --help' for a command\n"
    "  --version       print the version and the kernel ISA\n"
    "  --no-cache      (with any command) load a checkpoint without the packed-model cache\n";

static const struct {
    const char *name;
    int (*fn)(int, char **);
} commands[] = {
    {"run", hm_cli_run},
    {"batch", hm_cli_batch},
    {"regress", hm_cli_regress},
    {"crop", hm_cli_crop},
    {"bench", hm_cli_bench},
    {"serve", hm_serve_main},
    {"convert", hm_cli_convert},
    {"detect", hm_cli_detect},
    {"worker", hm_worker_main},
    {"submit", hm_submit_main},
    {"results", hm_results_main},
    {"video", hm_cli_video},
    {"live", hm_cli_live},
};

int main(int argc, char **argv) {
    hamer_log_set(hm_tool_library_log, NULL); /* the library never prints */
    if (argc < 2) {
        fputs(USAGE_MAIN, stderr);
        return 2;
    }
    const char *cmd = argv[1];
    if (!strcmp(cmd, "-h") || !strcmp(cmd, "--help") || !strcmp(cmd, "help")) {
        fputs(USAGE_MAIN, stdout);
        return 0;
    }
    if (!strcmp(cmd, "--version")) {
        printf("hamer %s (%s)\n", hamer_version(), hamer_system_info());
        return 0;
    }
    /* --no-cache is taken here for every command that loads a model (the
     * library reads it as HAMER_NO_CACHE), so their parsers need not know
     * it; "--" ends the options it is looked for in. */
    int n = 2;
    for (int i = 2; i < argc; i++) {
        if (!strcmp(argv[i], "--")) {
            while (i < argc) argv[n++] = argv[i++];
            break;
        }
        if (!strcmp(argv[i], "--no-cache")) setenv("HAMER_NO_CACHE", "1", 1);
        else argv[n++] = argv[i];
    }
    argc = n;
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (!strcmp(cmd, commands[i].name)) return commands[i].fn(argc - 2, argv + 2);
    return hm_tool_fail(2, "unknown command '%s' (see 'hamer --help')", cmd);
}
