namespace muflow::kernels::cpu {}
