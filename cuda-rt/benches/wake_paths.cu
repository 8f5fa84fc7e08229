// How fast can a waiting thread learn that GPU work has finished? An empty kernel and an event
// behind it, then each way of waiting: spinning on cudaEventQuery, cudaEventSynchronize, a host
// function (cudaLaunchHostFunc) on the stream or on a second stream behind cudaStreamWaitEvent,
// and a second thread that spins on cudaEventQuery (the futures' spinner); the waiting thread
// either spins on a flag or sleeps in the kernel (a futex, as a parked executor thread does).
// Last, a futex ping-pong without CUDA: the cost of waking a sleeping thread.
//
// Build and run on a GPU machine:
//   nvcc -O2 -std=c++20 -arch=sm_90 -o wake_paths cuda-rt/benches/wake_paths.cu && ./wake_paths
// Prints the median, 10th and 90th percentile of 3,000 waits per row, in two rounds (the first
// warms up). BENCHMARKS.md ("Futures: awaiting GPU work") reads it.
#include <cuda_runtime.h>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <thread>
#include <vector>
using clk = std::chrono::steady_clock;
#define CK(x)                                                 \
    do {                                                      \
        cudaError_t err_ = (x);                               \
        if (err_) {                                           \
            printf("%s: %s\n", #x, cudaGetErrorString(err_)); \
            exit(1);                                          \
        }                                                     \
    } while (0)
__global__ void empty() {}

static std::atomic<int> flag{0};
static void CUDART_CB hostfn(void*) {
    flag.store(1, std::memory_order_release);
    flag.notify_one();
}

// The second thread: queries the event in `watch` until it has occurred, then sets the flag
// (and wakes a sleeping waiter when notify_mode is set).
static std::atomic<cudaEvent_t> watch{nullptr};
static std::atomic<bool> stop{false};
static std::atomic<int> notify_mode{1};
static void spinner() {
    CK(cudaSetDevice(0));
    while (!stop.load()) {
        cudaEvent_t e = watch.load(std::memory_order_acquire);
        if (!e) {
#if defined(__x86_64__)
            __builtin_ia32_pause();
#endif
            continue;
        }
        cudaError_t status = cudaEventQuery(e);
        if (status != cudaSuccess && status != cudaErrorNotReady) CK(status);
        if (status == cudaSuccess) {
            watch.store(nullptr);
            flag.store(1, std::memory_order_release);
            if (notify_mode.load()) flag.notify_one();
        }
    }
}

static double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}
static double p(std::vector<double> v, double q) {
    std::sort(v.begin(), v.end());
    return v[(size_t)(q * (v.size() - 1))];
}

int main() {
    CK(cudaSetDevice(0));
    cudaStream_t s, w;
    CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    CK(cudaStreamCreateWithFlags(&w, cudaStreamNonBlocking));
    cudaEvent_t e, e2;
    CK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    CK(cudaEventCreateWithFlags(&e2, cudaEventDisableTiming));
    std::thread sp(spinner);
    const int N = 3000;
    auto run = [&](const char* name, std::function<void()> wait) {
        std::vector<double> t;
        for (int i = 0; i < N + 200; i++) {
            auto t0 = clk::now();
            empty<<<1, 1, 0, s>>>();
            CK(cudaEventRecord(e, s));
            wait();
            auto t1 = clk::now();
            if (i >= 200) t.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
        }
        printf("%-58s median %7.2f us  p10 %7.2f  p90 %7.2f\n", name, median(t), p(t, .1),
               p(t, .9));
    };
    auto spin_query = [&] {
        cudaError_t s;
        while ((s = cudaEventQuery(e)) == cudaErrorNotReady) {
        }
        CK(s);
    };
    auto futex_wait = [&] {
        while (!flag.load(std::memory_order_acquire)) flag.wait(0);
        flag.store(0);
    };
    auto spin_flag = [&] {
        while (!flag.load(std::memory_order_acquire)) {
        }
        flag.store(0);
    };
    auto spin_then_park = [&](int us) {
        return [&, us] {
            auto t0 = clk::now();
            while (!flag.load(std::memory_order_acquire)) {
                if (clk::now() - t0 > std::chrono::microseconds(us)) {
                    while (!flag.load(std::memory_order_acquire)) flag.wait(0);
                    break;
                }
            }
            flag.store(0);
        };
    };
    for (int round = 0; round < 2; round++) {
        printf("--- round %d\n", round);
        run("A spin cudaEventQuery on caller", spin_query);
        run("A2 cudaEventSynchronize", [&] { CK(cudaEventSynchronize(e)); });
        run("B host fn on stream, caller futex-waits", [&] {
            CK(cudaLaunchHostFunc(s, hostfn, nullptr));
            futex_wait();
        });
        run("B2 host fn on waiter stream after wait, caller futex", [&] {
            CK(cudaStreamWaitEvent(w, e, 0));
            CK(cudaLaunchHostFunc(w, hostfn, nullptr));
            futex_wait();
        });
        run("B3 host fn on stream, caller spins on flag", [&] {
            CK(cudaLaunchHostFunc(s, hostfn, nullptr));
            spin_flag();
        });
        notify_mode = 1;
        run("C spinner queries event, caller futex-waits", [&] {
            watch.store(e);
            futex_wait();
        });
        run("C2 spinner queries event, caller spin 20us then futex", [&] {
            watch.store(e);
            spin_then_park(20)();
        });
        notify_mode = 0;
        run("D spinner queries event, caller spins on flag", [&] {
            watch.store(e);
            spin_flag();
        });
        notify_mode = 1;
        run("E spinner queries e2 (waiter stream), caller futex", [&] {
            CK(cudaStreamWaitEvent(w, e, 0));
            CK(cudaEventRecord(e2, w));
            watch.store(e2);
            futex_wait();
        });
        notify_mode = 0;
        run("E2 spinner queries e2 (waiter stream), caller spins", [&] {
            CK(cudaStreamWaitEvent(w, e, 0));
            CK(cudaEventRecord(e2, w));
            watch.store(e2);
            spin_flag();
        });
        notify_mode = 1;
        run("F record e2 on same stream, spinner, caller futex", [&] {
            CK(cudaEventRecord(e2, s));
            watch.store(e2);
            futex_wait();
        });
    }
    // plain futex ping-pong
    {
        std::atomic<int> a{0};
        std::vector<double> t;
        std::thread th([&] {
            for (int i = 0; i < N; i++) {
                while (a.load() != 1) a.wait(0);
                a.store(2);
                a.notify_one();
            }
        });
        for (int i = 0; i < N; i++) {
            std::this_thread::sleep_for(std::chrono::microseconds(20));
            auto t0 = clk::now();
            a.store(1);
            a.notify_one();
            while (a.load() != 2) a.wait(1);
            a.store(0);
            t.push_back(std::chrono::duration<double, std::micro>(clk::now() - t0).count());
        }
        th.join();
        printf("%-58s median %7.2f us  p10 %7.2f  p90 %7.2f\n",
               "G futex ping-pong round trip (2 wakes), after 20us idle", median(t), p(t, .1),
               p(t, .9));
    }
    stop = true;
    sp.join();
    return 0;
}
