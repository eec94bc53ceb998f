/* Stand-in for libcudnn.so.9 as cuDNN 9 ships it: a small dispatch library that exports the whole
 * API and implements none of it. At the first call of a function it opens the sub-library that
 * holds it (libcudnn_graph, libcudnn_ops, libcudnn_cnn: cudnn_stub.c built three times) with
 * dlopen, beside itself, and forwards the call to that library's function of the same name,
 * found with dlsym, so the call inside never passes through the global symbol scope (and never
 * through sonde's wrappers a second time). The real libcudnn.so.9 has no DT_NEEDED on its
 * sub-libraries either. */
#include <dlfcn.h>
#include <stddef.h>

enum part { GRAPH, OPS, CNN };
static const char* const kLibraries[] = {"libcudnn_graph.so.9", "libcudnn_ops.so.9",
                                         "libcudnn_cnn.so.9"};
static void* handles[3];

static void* resolve(enum part p, const char* name) {
  if (handles[p] == NULL) handles[p] = dlopen(kLibraries[p], RTLD_NOW | RTLD_LOCAL);
  return handles[p] != NULL ? dlsym(handles[p], name) : NULL;
}

/* Each function forwards its own arguments, whatever they are: GCC's __builtin_apply copies the
 * argument registers and STACK_ARGS bytes of stack arguments (cuDNN's longest call, the batch
 * norm Ex forms, passes 25 arguments: 19 stack words at most). */
#define STACK_ARGS 512
#define X(PART, NAME)                                                    \
  void NAME(void) {                                                      \
    void* args = __builtin_apply_args();                                 \
    static void (*fn)(void);                                             \
    if (fn == NULL) fn = (void (*)(void))resolve(PART, #NAME);           \
    if (fn == NULL) __builtin_trap(); /* the sub-library must have it */ \
    __builtin_return(__builtin_apply(fn, args, STACK_ARGS));             \
  }
X(GRAPH, cudnnCreate)
X(GRAPH, cudnnDestroy)
X(OPS, cudnnCreateTensorDescriptor)
X(OPS, cudnnDestroyTensorDescriptor)
X(OPS, cudnnSetTensorNdDescriptor)
X(OPS, cudnnSetTensor4dDescriptor)
X(OPS, cudnnGetTensorNdDescriptor)
X(OPS, cudnnGetTensor4dDescriptor)
X(OPS, cudnnCreateFilterDescriptor)
X(OPS, cudnnDestroyFilterDescriptor)
X(OPS, cudnnSetFilterNdDescriptor)
X(OPS, cudnnSetFilter4dDescriptor)
X(OPS, cudnnGetFilterNdDescriptor)
X(OPS, cudnnGetFilter4dDescriptor)
X(CNN, cudnnCreateConvolutionDescriptor)
X(CNN, cudnnDestroyConvolutionDescriptor)
X(CNN, cudnnSetConvolution2dDescriptor)
X(CNN, cudnnSetConvolutionGroupCount)
X(CNN, cudnnGetConvolutionGroupCount)
X(CNN, cudnnGetConvolution2dForwardOutputDim)
X(OPS, cudnnCreatePoolingDescriptor)
X(OPS, cudnnDestroyPoolingDescriptor)
X(OPS, cudnnCreateActivationDescriptor)
X(OPS, cudnnDestroyActivationDescriptor)
X(CNN, cudnnConvolutionForward)
X(CNN, cudnnConvolutionBackwardData)
X(CNN, cudnnConvolutionBackwardFilter)
X(CNN, cudnnConvolutionBiasActivationForward)
X(OPS, cudnnPoolingForward)
X(OPS, cudnnPoolingBackward)
X(OPS, cudnnActivationForward)
X(OPS, cudnnActivationBackward)
X(OPS, cudnnBatchNormalizationForwardTraining)
X(OPS, cudnnBatchNormalizationForwardInference)
X(OPS, cudnnBatchNormalizationBackward)
X(OPS, cudnnBatchNormalizationForwardTrainingEx)
X(OPS, cudnnBatchNormalizationBackwardEx)
X(OPS, cudnnSoftmaxForward)
X(OPS, cudnnSoftmaxBackward)
X(GRAPH, cudnnBackendExecute)
X(GRAPH, cudnnBackendCreateDescriptor)
X(GRAPH, cudnnBackendDestroyDescriptor)
X(GRAPH, cudnnBackendFinalize)
X(GRAPH, cudnnBackendSetAttribute)
X(GRAPH, cudnnBackendGetAttribute)
X(GRAPH, cudnnGetErrorString)
X(OPS, cudnnSetActivationDescriptor)
X(OPS, cudnnSetPooling2dDescriptor)
X(OPS, cudnnAddTensor)
X(CNN, cudnnConvolutionBackwardBias)
X(CNN, cudnnGetConvolutionForwardAlgorithm_v7)
X(CNN, cudnnGetConvolutionBackwardDataAlgorithm_v7)
X(CNN, cudnnGetConvolutionBackwardFilterAlgorithm_v7)
X(CNN, cudnnGetConvolutionForwardWorkspaceSize)
X(CNN, cudnnGetConvolutionBackwardDataWorkspaceSize)
X(CNN, cudnnGetConvolutionBackwardFilterWorkspaceSize)
