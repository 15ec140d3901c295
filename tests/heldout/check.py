"""memest against the held-out models' truth: one line per model x batch x
mode with the signed error of each step and the notes memest printed.
Usage: python3 tests/heldout/check.py build/memest [ho|ho2|ho3|ho4|ho5|ho6|ho7|ho8|ho9|ho10|ho11|ho12|ho13|ho14|ho15|ho16|ho17|ho18|ho19|ho20|ho21]  (repo root;
the set, default ho)"""
import json, os, subprocess, sys
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from truth_loss import memest_cpu_isa, memest_loss  # noqa: E402
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MEMEST = sys.argv[1]
MODES = {"infer_nograd": [], "infer_grad": ["--grad"], "train_sgd": ["--train", "--optimizer", "sgd"], "train_adam": ["--train", "--optimizer", "adam"]}
rows = []
SETS = {"ho": ["ho_vit_b_32", "ho_mnasnet1_0", "ho_regnet_x_400mf", "ho_tenc"],
        "ho2": ["ho2_resnext50", "ho2_mobilenet_v3_small", "ho2_alexnet"],
        "ho3": ["ho3_vgg11_bn", "ho3_squeezenet1_1", "ho3_wide_resnet50_2"],
        "ho4": ["ho4_resnet34", "ho4_shufflenet_v2_x0_5", "ho4_regnet_y_800mf", "ho4_tdec"],
        "ho5": ["ho5_mnasnet0_5", "ho5_regnet_x_800mf", "ho5_tfull", "ho5_shufflenet_v2_x1_5"],
        "ho6": ["ho6_r2plus1d_18", "ho6_lraspp_mbv3", "ho6_efficientnet_b2", "ho6_tenc_post"],
        "ho7": ["ho7_mc3_18", "ho7_fcn_resnet50", "ho7_regnet_y_1_6gf", "ho7_xattn"],
        "ho8": ["ho8_densenet169", "ho8_conformer", "ho8_mixer", "ho8_vgg13"],
        "ho9": ["ho9_fpn_resnet34", "ho9_fpn_mbv3"],
        "ho10": ["ho10_dcgan", "ho10_style", "ho10_espcn", "ho10_tcn"],
        "ho11": ["ho11_cyclegan", "ho11_pix2pix", "ho11_ae", "ho11_vocoder"],
        "ho12": ["ho12_pointnet", "ho12_segnet", "ho12_perceiver", "ho12_linattn"],
        "ho13": ["ho13_enet", "ho13_stargan", "ho13_denoiser", "ho13_srgan"],
        "ho14": ["ho14_crnn", "ho14_bifpn", "ho14_mobilevit", "ho14_gnn"],
        "ho15": ["ho15_cbam", "ho15_wavenet", "ho15_vae", "ho15_swin"],
        "ho16": ["ho16_stn", "ho16_moe", "ho16_realnvp", "ho16_convlstm"],
        "ho17": ["ho17_hourglass", "ho17_pixelcnn", "ho17_capsnet", "ho17_nerf"],
        "ho18": ["ho18_gmlp", "ho18_res2net", "ho18_ghostnet", "ho18_convnextv2"],
        "ho19": ["ho19_vqvae", "ho19_dlrm", "ho19_sknet", "ho19_nystrom"],
        "ho20": ["ho20_poolformer", "ho20_albert", "ho20_xception", "ho20_mae"],
        "ho21": ["ho21_hrnet", "ho21_siamese", "ho21_relbias", "ho21_odenet"]}
for name in SETS[sys.argv[2] if len(sys.argv) > 2 else "ho"]:
    t = json.load(open(os.path.join(ROOT, "golden", "truth", "heldout", name + ".json")))
    for b, e in t["batches"].items():
        for mode, extra in MODES.items():
            if mode not in e: continue
            loss = []
            if mode.startswith("train"):
                loss = ["--loss", memest_loss(t.get("loss"))]
            isa = memest_cpu_isa(t)
            cmd = [MEMEST, os.path.join(ROOT, "models", "onnx", "heldout", name + ".onnx"), "--batch", b, "--runtime", "cpu", "--format", "json"] + extra + loss + isa
            r = subprocess.run(cmd, capture_output=True, text=True)
            if r.returncode != 0:
                rows.append((name, b, mode, "ERR " + r.stderr.strip()[:150])); continue
            d = json.loads(r.stdout)
            steps = d["memory"]["steps"]
            notes = [n["code"] for n in d.get("notes", [])]
            if mode.startswith("train"):
                meas = [e[mode]["step1"]["peak"], e[mode]["step2"]["peak"]]
            else:
                meas = [e[mode]["peak"]]; steps = steps[:1]
            errs = ["%+.2f%%" % (100 * (s["peak"] - m) / m) for s, m in zip(steps, meas)]
            rows.append((name, b, mode, " ".join(errs) + ("  notes:" + ",".join(notes) if notes else "")))
    print(name, "params memest", d["totals"]["params"], "pytorch", t["params"])
for r in rows: print(*r)
