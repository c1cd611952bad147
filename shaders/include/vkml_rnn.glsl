// What the recurrences (shaders/lstm.comp, gru.comp) share: their activations, as vkml/ops/rnn.py
// computes them, and the index of a state or output element. The including shader includes
// vkml_math.glsl first, defines its CLIP flag and declares the push-constant block `pc` with
// seq, batch, hidden, dirs, layout_ (0: [seq, batch, ...] / [dirs, batch, H]; 1: [batch, seq,
// ...] / [batch, dirs, H]), flags, clip, and act[], alpha[], beta[] (an activation's code and
// parameters, by the shader's own numbering of its activations).
#ifndef VKML_RNN_GLSL
#define VKML_RNN_GLSL

#ifndef VKML_MATH_GLSL
#error "include vkml_math.glsl before vkml_rnn.glsl"
#endif
#ifndef CLIP
#error "define CLIP (the flag of the clip attribute) before including vkml_rnn.glsl"
#endif

// activation codes (vkml/kernels/rnn_common.py ACTIVATIONS)
#define A_RELU 0u
#define A_TANH 1u
#define A_SIGMOID 2u
#define A_AFFINE 3u
#define A_LEAKYRELU 4u
#define A_THRESHOLDEDRELU 5u
#define A_SCALEDTANH 6u
#define A_HARDSIGMOID 7u
#define A_ELU 8u
#define A_SOFTSIGN 9u
#define A_SOFTPLUS 10u

// As the NumPy operator: split by sign so exp never overflows.
float sigmoid(float x) {
    float e = exp(-abs(x));
    return x >= 0.0 ? 1.0 / (1.0 + e) : e / (1.0 + e);
}

// vkml/ops/rnn.py's _ACTIVATIONS.
float activate(uint k, float x) {
    uint code = pc.act[k];
    float a = pc.alpha[k], b = pc.beta[k];
    if (code == A_SIGMOID) return sigmoid(x);
    if (code == A_TANH) return vkml_tanh(x);
    if (code == A_RELU) return max(x, 0.0);
    if (code == A_AFFINE) return a * x + b;
    if (code == A_LEAKYRELU) return x >= 0.0 ? x : a * x;
    if (code == A_THRESHOLDEDRELU) return x > a ? x : 0.0;
    if (code == A_SCALEDTANH) return a * vkml_tanh(b * x);
    if (code == A_HARDSIGMOID) return clamp(a * x + b, 0.0, 1.0);
    if (code == A_ELU) return x >= 0.0 ? x : a * vkml_expm1(min(x, 0.0));
    if (code == A_SOFTSIGN) return x / (1.0 + abs(x));
    return max(x, 0.0) + vkml_log1p(exp(-abs(x)));  // A_SOFTPLUS: logaddexp(0, x)
}

float clipped(float v) {
    return (pc.flags & CLIP) != 0u ? clamp(v, -pc.clip, pc.clip) : v;
}

// Index of (direction d, batch b, unit j) in initial_h / Y_h (and LSTM's initial_c / Y_c).
uint state_index(uint d, uint b, uint j) {
    return (pc.layout_ == 0u ? d * pc.batch + b : b * pc.dirs + d) * pc.hidden + j;
}

// Index of (step t, direction d, batch b, unit j) in Y.
uint y_index(uint t, uint d, uint b, uint j) {
    return (pc.layout_ == 0u ? (t * pc.dirs + d) * pc.batch + b : (b * pc.seq + t) * pc.dirs + d) * pc.hidden + j;
}

#endif
