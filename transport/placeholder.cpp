namespace muflow::transport {}
